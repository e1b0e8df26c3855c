package bench

import "syscall"

// childAttr has the kernel kill a benchmark's server when the process that
// started it dies, however it dies (os.Exit, a signal, SIGKILL).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
