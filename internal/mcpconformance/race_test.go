//go:build race

package mcpconformance

// raceEnabled builds the utcpd binary under test with the race detector
// too.
const raceEnabled = true
