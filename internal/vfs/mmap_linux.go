package vfs

import (
	"os"
	"syscall"
)

// Map maps the first length bytes of the file into memory, shared and
// writable (Mapper). The file must be open for reading and writing.
func (f *osFile) Map(length int) ([]byte, error) {
	c, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var b []byte
	var merr error
	if err := c.Control(func(fd uintptr) {
		b, merr = syscall.Mmap(int(fd), 0, length, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	}); err != nil {
		return nil, err
	}
	if merr != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: merr}
	}
	return b, nil
}

// Unmap removes a mapping Map made.
func Unmap(b []byte) error {
	if err := syscall.Munmap(b); err != nil {
		return &os.PathError{Op: "munmap", Err: err}
	}
	return nil
}
