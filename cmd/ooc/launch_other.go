//go:build !linux

package main

import "syscall"

// rankProcAttr puts a rank in its own process group, so that a terminal's
// Ctrl-C reaches it once, through the launcher. (No Pdeathsig here: a rank
// outlives a launcher that is killed.)
func rankProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
