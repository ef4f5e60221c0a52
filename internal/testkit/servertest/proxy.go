package servertest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target and can be switched
// off: its listener closes (new connections are refused, as from a
// server that is down) and its open connections are cut.
type Proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// NewProxy returns a proxy, up, on a free loopback port; its target
// is set by Route. Cleanup stops it.
func NewProxy(t *testing.T) *Proxy {
	p := &Proxy{t: t, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.Down(); p.wg.Wait() })
	return p
}

// Route sets the target from the simulated endpoint's URL and returns the
// same URL through the proxy, for the client under test.
func (p *Proxy) Route(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		p.t.Errorf("proxy target %q: %v", raw, err)
		return raw
	}
	p.mu.Lock()
	p.target = u.Host
	p.mu.Unlock()
	u.Host = p.addr
	return u.String()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() { // owned by p: Cleanup waits for it
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.ln != ln { // Down ran between Accept and here: this connection must not outlive it
				p.mu.Unlock()
				c.Close()
				return
			}
			target := p.target
			p.conns[c] = true
			p.mu.Unlock()
			p.wg.Add(1)
			go func() { // owned by p
				defer p.wg.Done()
				defer func() { p.mu.Lock(); delete(p.conns, c); p.mu.Unlock(); c.Close() }()
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(up, c); done <- struct{}{} }() // ends when either side closes
				go func() { io.Copy(c, up); done <- struct{}{} }()
				<-done
				c.Close()
				up.Close()
				<-done
			}()
		}
	}()
}

// Down refuses new connections and cuts the open ones.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// Up listens again on the same address.
func (p *Proxy) Up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Errorf("proxy up again on %s: %v", p.addr, err)
		return
	}
	p.serve(ln)
}
