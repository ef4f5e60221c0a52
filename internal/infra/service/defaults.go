package service

// number is the kinds of count, size and duration settings.
type number interface {
	~int | ~int32 | ~int64 | ~float64
}

// Positive returns v when it is positive, else def: the default of a
// count, size or duration setting whose zero (or negative) value means
// unset. It is the "<= 0" counterpart of cmp.Or, which replaces only the
// zero value.
func Positive[T number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
