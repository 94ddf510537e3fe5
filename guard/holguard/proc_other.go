//go:build !unix

package holguard

import "os/exec"

// ownProcessGroup leaves cmd as it is: cancellation kills the process
// itself (exec.CommandContext's default).
func ownProcessGroup(*exec.Cmd) {}
