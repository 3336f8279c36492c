//go:build unix

package resp

import "syscall"

// peek reads one byte without taking it or waiting: none and no error is the client's close,
// an error other than "nothing yet" its reset.
func peek(rc syscall.RawConn) bool {
	gone := false
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = n == 0 && err == nil || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
		return true
	})
	return gone
}
