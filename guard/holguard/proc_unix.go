//go:build unix

package holguard

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a process group of its own and makes
// cancellation (the timeout, or the call's context ending) kill the whole
// group, so that a hol-guard that started helpers leaves none behind.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		// The leader is not yet reaped while Cancel runs, so its pid
		// still names this group.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
