package calc

import "testing"

func TestBroken(t *testing.T) {
	if Nope() != 1 { // Nope is not defined anywhere
		t.Fail()
	}
}
