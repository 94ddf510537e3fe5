//go:build !race

package mcpconformance

const raceEnabled = false
