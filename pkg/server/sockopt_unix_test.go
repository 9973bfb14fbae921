//go:build unix

package server_test

import "syscall"

// smallReceiveBuffer is a net.Dialer Control that sets a 4 kB receive
// buffer before connecting, so the window the connection advertises stays
// small: a client that does not read stalls the server's writes quickly.
func smallReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	})
	if err != nil {
		return err
	}
	return serr
}
