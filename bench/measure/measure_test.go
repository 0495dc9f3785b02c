package measure

import (
	"math"
	"strings"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want Spread
		text string
	}{
		{[]float64{3}, Spread{3, 3, 3}, "3.0"},
		{[]float64{5, 1, 3}, Spread{3, 1, 5}, "3.0 [1.0–5.0]"},
		{[]float64{4, 1, 2, 10}, Spread{3, 1, 10}, "3.0 [1.0–10.0]"}, // even: the mean of the middle two
		{[]float64{2, 2}, Spread{2, 2, 2}, "2.0"},
	} {
		in := append([]float64(nil), tc.v...)
		got := SpreadOf(tc.v)
		if got != tc.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", tc.v, got, tc.want)
		}
		if m := Median(tc.v); m != tc.want.Median {
			t.Errorf("Median(%v) = %v, want %v", tc.v, m, tc.want.Median)
		}
		if s := got.Format("%.1f"); s != tc.text {
			t.Errorf("Format = %q, want %q", s, tc.text)
		}
		for i := range in {
			if in[i] != tc.v[i] {
				t.Fatalf("SpreadOf sorted its argument: %v, was %v", tc.v, in)
			}
		}
	}
	if m := Median(nil); m != 0 {
		t.Errorf("Median(nil) = %v, want 0", m)
	}
	if s := SpreadOf(nil); !math.IsNaN(s.Median) || s.Format("%.0f") != "—" {
		t.Errorf("SpreadOf(nil) = %+v (%q), want NaN, printed —", s, s.Format("%.0f"))
	}
	if s := (Spread{1, 0.5, 2}).Map(func(v float64) float64 { return 100 * v }); s != (Spread{100, 50, 200}) {
		t.Errorf("Map(100 × v) = %+v", s)
	}
}

func TestTable(t *testing.T) {
	tab := NewTable("", "a", "b")
	tab.Row("x", "1", "2")
	tab.Row("y", "3") // padded
	var b strings.Builder
	if err := tab.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "| | a | b |\n|---|---|---|\n| x | 1 | 2 |\n| y | 3 | |\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	tab.Row("z", "1", "2", "3")
	b.Reset()
	if err := tab.Write(&b); err == nil || b.Len() != 0 {
		t.Errorf("a row wider than the header: err %v, wrote %q; want an error and nothing written", err, b.String())
	}
}
