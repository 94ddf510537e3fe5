package main

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n         int
		one, many string
		want      string
	}{
		{0, "tool", "", "0 tools"},
		{1, "tool", "", "1 tool"},
		{2, "manual call template", "", "2 manual call templates"},
		{1, "manual call template", "", "1 manual call template"},
		{3, "entry", "entries", "3 entries"},
	} {
		if got := count(c.n, c.one, c.many); got != c.want {
			t.Errorf("count(%d, %q) = %q, want %q", c.n, c.one, got, c.want)
		}
	}
}
