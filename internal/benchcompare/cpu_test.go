package main

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestCPUTime reads this process's CPU time from /proc: it grows while
// the test spins, and a process that is gone reads 0.
func TestCPUTime(t *testing.T) {
	before := cpuTime(0)
	if own := cpuTime(os.Getpid()); own < before {
		t.Errorf("cpuTime(own pid) = %v, below cpuTime(0) = %v read before it", own, before)
	}
	deadline := time.Now().Add(30 * time.Second)
	for cpuTime(0) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("cpuTime(0) stayed at %v while spinning", before)
		}
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got := cpuTime(cmd.Process.Pid); got != 0 {
		t.Errorf("cpuTime of an ended process = %v, want 0", got)
	}
}

// TestDescendants finds a child and a grandchild of this process.
func TestDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30; :")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := descendants(os.Getpid())
		if slices.Contains(d, cmd.Process.Pid) && len(descendants(cmd.Process.Pid)) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("descendants(self) = %v, descendants(sh %d) = %v", d, cmd.Process.Pid, descendants(cmd.Process.Pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
