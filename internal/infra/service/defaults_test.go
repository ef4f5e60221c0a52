package service

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	if got := Positive(0, 8); got != 8 {
		t.Errorf("Positive(0, 8) = %d, want 8", got)
	}
	if got := Positive(-1, 8); got != 8 {
		t.Errorf("Positive(-1, 8) = %d, want 8 (negative is unset too)", got)
	}
	if got := Positive(3, 8); got != 3 {
		t.Errorf("Positive(3, 8) = %d, want 3", got)
	}
	if got := Positive(time.Duration(0), time.Minute); got != time.Minute {
		t.Errorf("Positive(0s, 1m) = %v, want 1m", got)
	}
	if got := Positive(0.5, 2); got != 0.5 {
		t.Errorf("Positive(0.5, 2) = %v, want 0.5", got)
	}
}
