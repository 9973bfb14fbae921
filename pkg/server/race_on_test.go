//go:build race

package server_test

// raceEnabled: the race detector makes parsing about ten times slower.
const raceEnabled = true
