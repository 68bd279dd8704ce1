package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certRecheck is how often, at most, the certificate files are looked at
// for a renewal.
const certRecheck = 10 * time.Second

// serveTLSConfig returns the TLS settings of rap serve for a certificate
// chain and key in PEM files. The files are read again when they change
// (a renewal needs no restart); a pair that no longer loads keeps the last
// good one in use, and the problem is logged. A key file that every user
// may read is refused.
func serveTLSConfig(certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	if fi, err := os.Stat(keyFile); err != nil {
		return nil, fmt.Errorf("TLS key: %w (pass --tls-key FILE)", err)
	} else if fi.Mode().Perm()&0o004 != 0 {
		return nil, fmt.Errorf("TLS key %s can be read by every user (mode %04o): make it private with: chmod 600 %s", keyFile, fi.Mode().Perm(), keyFile)
	}
	c := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := c.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}, nil
}

// certReloader serves a certificate pair, loaded again when its files
// change.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]time.Time // the files' modification times at the last load
	lastCheck time.Time
}

func (c *certReloader) modTimes() [2]time.Time {
	var t [2]time.Time
	for i, f := range []string{c.certFile, c.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			t[i] = fi.ModTime()
		}
	}
	return t
}

func (c *certReloader) load() error {
	stamp := c.modTimes()
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("load the TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.stamp, c.lastCheck = &cert, stamp, time.Now()
	return nil
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.lastCheck) >= certRecheck {
		c.lastCheck = time.Now()
		if c.modTimes() != c.stamp {
			if err := c.load(); err != nil {
				c.stamp = c.modTimes() // log once per change
				c.log.Error("TLS certificate not reloaded; the previous one stays in use", "err", err)
			} else {
				c.log.Info("TLS certificate reloaded", "cert", c.certFile)
			}
		}
	}
	return c.cert, nil
}
