package main

import "syscall"

// rankProcAttr puts a rank in its own process group, so that a terminal's
// Ctrl-C reaches it once, through the launcher, not twice (a second
// interrupt kills ooc train); and has the kernel send it SIGTERM if the
// launcher dies without passing one on.
func rankProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
