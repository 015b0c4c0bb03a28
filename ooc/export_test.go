package ooc

// WithPoison is withPoison, for the external tests.
var WithPoison = withPoison
