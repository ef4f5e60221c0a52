package bus

import "testing"

func TestScanEndIsTransientWhileMessagesArePending(t *testing.T) {
	if err := scanEnd("s", 0); err != nil {
		t.Fatalf("nothing pending: %v, want the end", err)
	}
	if err := scanEnd("s", 3); err == nil || !IsTransient(err) {
		t.Fatalf("3 pending: %v, want a transient error (not the end of the scan)", err)
	}
}
