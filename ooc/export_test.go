package ooc

// WithPoison is withPoison, for the external tests.
var WithPoison = withPoison

// Operands is operands, for the external tests.
var Operands = operands
