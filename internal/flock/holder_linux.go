//go:build linux

package flock

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// kernelHolder returns the process the kernel lists in /proc/locks as
// holding a flock(2) lock on the file at path: the exclusive holder if
// there is one, else a shared one; 0 if none is listed or /proc is not
// mounted. It knows holders that record nothing (a shared lock, an older
// program).
func kernelHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	dev := uint64(st.Dev)
	want := strconv.FormatUint(uint64(st.Ino), 10)
	shared := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9977997 0 EOF"; a waiter's
		// line has "->" after the number.
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[1] != "FLOCK" {
			continue
		}
		id := strings.Split(fl[5], ":")
		if len(id) != 3 || id[2] != want {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		min, err2 := strconv.ParseUint(id[1], 16, 32)
		pid, err3 := strconv.Atoi(fl[4])
		if err1 != nil || err2 != nil || err3 != nil || pid <= 0 || maj != devMajor(dev) || min != devMinor(dev) {
			continue
		}
		if fl[3] == "WRITE" {
			return pid
		}
		if shared == 0 {
			shared = pid
		}
	}
	return shared
}

// devMajor and devMinor split a Linux device number as glibc's
// gnu_dev_major and gnu_dev_minor do (golang.org/x/sys/unix's Major and
// Minor, without compiling that package into every program that opens a
// DB).
func devMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff) }

func devMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^uint64(0xff) }
