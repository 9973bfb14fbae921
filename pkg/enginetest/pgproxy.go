package enginetest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// PGProxy relays loopback TCP connections to PostgreSQL, so that a test
// can make the database go away under a running server without
// restarting the shared PostgreSQL: Cut closes every relayed connection
// and refuses new ones (accepted, then closed at once, as a restarting
// server does); Heal lets them through again.
type PGProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

// NewPGProxy listens on loopback and relays to upstream (host:port) until
// t ends.
func NewPGProxy(t testing.TB, upstream string) *PGProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &PGProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		wg.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.down {
				p.mu.Unlock()
				c.Close()
				up.Close()
				continue
			}
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			wg.Add(2)
			relay := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				p.mu.Lock()
				delete(p.conns, dst)
				delete(p.conns, src)
				p.mu.Unlock()
			}
			go relay(up, c)
			go relay(c, up)
		}
	}()
	return p
}

func (p *PGProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Cut closes every relayed connection and refuses new ones until Heal.
func (p *PGProxy) Cut() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.closeAll()
}

// Heal lets connections through again.
func (p *PGProxy) Heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Via returns the database URL db reached through the proxy.
func (p *PGProxy) Via(t testing.TB, db string) string {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// ProxiedPostgres returns a fresh PostgreSQL database (Postgres) reached
// through a PGProxy, and the proxy.
func ProxiedPostgres(t testing.TB) (db string, p *PGProxy) {
	t.Helper()
	real := Postgres(t)
	u, err := url.Parse(real)
	if err != nil {
		t.Fatal(err)
	}
	p = NewPGProxy(t, u.Host)
	return p.Via(t, real), p
}
