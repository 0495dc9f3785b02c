package fleet

// Held is heldShare, for the tests of package fleet_test.
func (f *Fleet) Held() (fraction float64, fallen int) { return f.heldShare() }

// ShareQPS is shareQPS, for the tests of package fleet_test.
func (l *Limiter) ShareQPS() float64 { return l.shareQPS() }
