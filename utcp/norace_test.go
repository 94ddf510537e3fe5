//go:build !race

package utcp_test

// raceEnabled: the race detector is off (race_test.go).
const raceEnabled = false
