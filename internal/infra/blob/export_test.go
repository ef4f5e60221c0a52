package blob

// SetListPage changes how many keys one S3 List page covers, so tests can cross page
// boundaries with few objects. The returned function restores it.
func SetListPage(n int) (restore func()) {
	old := listPage
	listPage = n
	return func() { listPage = old }
}
