package toolsjson

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Policy is a parsed policy.caps: the capabilities granted to the bundle's
// tools.
//
// The file holds one grant per line. Blank lines and everything after "#"
// are ignored. A grant is FAMILY:VALUE ("net:api.mail.example",
// "fs:/var/spool/mail"); a trailing "*" grants every capability that starts
// with what comes before it ("net:*" grants every host, "fs:/tmp/*" every
// path under /tmp/). A "*" anywhere else is an error.
type Policy struct {
	// Lines are the grant lines in file order.
	Lines []string
}

// LoadPolicy reads policy.caps. A missing file grants nothing.
func LoadPolicy(path string) (*Policy, error) {
	data, err := readLimited(path)
	if err != nil {
		if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
			return &Policy{}, nil
		}
		return nil, err
	}
	return ParsePolicy(data)
}

// ParsePolicy parses the text of a policy.caps file.
func ParsePolicy(data []byte) (*Policy, error) {
	p := &Policy{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxToolsBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fam, val, ok := strings.Cut(line, ":")
		if !ok || fam == "" || val == "" || strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("line %d: %q is not a grant; write one FAMILY:VALUE per line, such as net:api.mail.example", n, line)
		}
		if i := strings.IndexByte(line, '*'); i >= 0 && i != len(line)-1 {
			return nil, fmt.Errorf("line %d: %q has a \"*\" that is not at the end; only a trailing * is a wildcard", n, line)
		}
		p.Lines = append(p.Lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Grants reports whether capability c is granted: by an equal grant, or a
// grant ending in "*" whose prefix c starts with.
func (p *Policy) Grants(c string) bool {
	for _, g := range p.Lines {
		if g == c {
			return true
		}
		if pre, ok := strings.CutSuffix(g, "*"); ok && strings.HasPrefix(c, pre) {
			return true
		}
	}
	return false
}

// GrantsHost reports whether a net: grant covers host (host or host:port):
// "net:HOST" covers the host on any port, "net:HOST:PORT" that port only.
func (p *Policy) GrantsHost(host string) bool {
	if host == "" {
		return false
	}
	if p.Grants("net:" + host) {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		return p.Grants("net:" + h)
	}
	return false
}
