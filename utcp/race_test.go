//go:build race

package utcp_test

// raceEnabled: the race detector is on, and sync.Pool drops a share of
// what is put back, so a pooled buffer is sometimes allocated afresh.
const raceEnabled = true
