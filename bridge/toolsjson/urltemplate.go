package toolsjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// URLTemplate is an http transport's url with {field} templates. Templates
// may appear in the path and the query, never in the scheme, host or port:
// a call can never send a request to a host the bundle did not declare.
type URLTemplate struct {
	raw string
	// split at the first "?": templates before it are path-escaped, after
	// it query-escaped.
	queryAt int
	// Fields are the template names in order.
	Fields []string
}

var templatePattern = regexp.MustCompile(`\{([^{}]*)\}`)
var fieldPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseURLTemplate checks an http transport's url.
func ParseURLTemplate(raw string) (*URLTemplate, error) {
	if raw == "" {
		return nil, errors.New("missing; want an absolute URL such as https://api.mail.example/send")
	}
	// Parse the URL with every template replaced by a plain word, so the
	// structure is judged without the templates.
	plain := templatePattern.ReplaceAllString(raw, "x")
	if strings.ContainsAny(plain, "{}") {
		return nil, fmt.Errorf("%q has an unbalanced { or }; templates are {field}", raw)
	}
	for _, r := range plain {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("\"<>\\^`|", r) {
			return nil, fmt.Errorf("%q holds %q, which must be percent-encoded in a URL", raw, r)
		}
	}
	u, err := url.Parse(plain)
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid URL: %v", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http:// or https:// URL", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q holds credentials; put them in a header with a ${secret:ID} placeholder", raw)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("%q has a fragment, which is never sent", raw)
	}
	t := &URLTemplate{raw: raw, queryAt: len(raw)}
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		t.queryAt = i
	}
	// The authority (scheme://host:port) must hold no template.
	rest := raw[len(u.Scheme)+3:]
	authority := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority = rest[:i]
	}
	if strings.ContainsAny(authority, "{}") {
		return nil, fmt.Errorf("%q has a template in its host; templates may appear only in the path and query", raw)
	}
	for _, m := range templatePattern.FindAllStringSubmatch(raw, -1) {
		if !fieldPattern.MatchString(m[1]) {
			return nil, fmt.Errorf("%q: template {%s} is not a field name; use letters, digits and _", raw, m[1])
		}
		t.Fields = append(t.Fields, m[1])
	}
	return t, nil
}

// Expand fills the templates from the top-level members of the input
// object. Strings are used as they are, numbers and booleans as their JSON
// text; each value is escaped for where it stands (path or query). A
// missing member or one of another type is an error, and so is a value
// that would make a path segment "." or ".." (ErrDotSegment).
func (t *URLTemplate) Expand(input json.RawMessage) (string, error) {
	var obj map[string]json.RawMessage
	if len(t.Fields) > 0 {
		if err := json.Unmarshal(input, &obj); err != nil {
			return "", fmt.Errorf("the input is not a JSON object: %v", err)
		}
	}
	var firstErr error
	idx := templatePattern.FindAllStringSubmatchIndex(t.raw, -1)
	var b strings.Builder
	var inPath []valueSpan
	last := 0
	for _, m := range idx {
		b.WriteString(t.raw[last:m[0]])
		last = m[1]
		name := t.raw[m[2]:m[3]]
		v, err := fieldText(obj, name)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if m[0] > t.queryAt {
			b.WriteString(url.QueryEscape(v))
		} else {
			start := b.Len()
			b.WriteString(url.PathEscape(v))
			inPath = append(inPath, valueSpan{start, b.Len(), name, v})
		}
	}
	b.WriteString(t.raw[last:])
	if firstErr != nil {
		return "", firstErr
	}
	out := b.String()
	if err := checkDotSegments(out, inPath); err != nil {
		return "", err
	}
	return out, nil
}

// ErrDotSegment is the error of a value that would make a path segment
// "." or "..": servers and proxies that normalise paths resolve those to
// the same or the parent path, so the request would reach another resource
// than the one the url names.
var ErrDotSegment = errors.New(`a path segment would be "." or ".."`)

// valueSpan is where a template's escaped value stands in an expanded url.
type valueSpan struct {
	start, end  int
	name, value string
}

// checkDotSegments refuses an expanded url whose path has a segment that
// reads "." or ".." once percent-decoded (as "%2E." does) and holds part
// of a value. PathEscape leaves "." as it is and can never make a "/", so
// only whole segments need checking; dot segments written in the template
// itself are the bundle author's choice.
func checkDotSegments(out string, spans []valueSpan) error {
	if len(spans) == 0 {
		return nil
	}
	pathEnd := strings.IndexByte(out, '?')
	if pathEnd < 0 {
		pathEnd = len(out)
	}
	// The authority is scanned like a segment; it never holds a value.
	pos := strings.Index(out, "://") + 3
	for pos < pathEnd {
		end := strings.IndexByte(out[pos:pathEnd], '/')
		if end < 0 {
			end = pathEnd
		} else {
			end += pos
		}
		seg := out[pos:end]
		if dec, err := url.PathUnescape(seg); err == nil && (dec == "." || dec == "..") {
			var names []string
			for _, sp := range spans {
				if sp.start < end && sp.end > pos {
					names = append(names, fmt.Sprintf("{%s} = %q", sp.name, sp.value))
				}
			}
			if len(names) > 0 {
				return fmt.Errorf("%w: the url's path segment %q comes from %s; servers and proxies resolve such a segment to another path than the url names, so it is refused. Send a value that is not %q", ErrDotSegment, seg, strings.Join(names, " and "), dec)
			}
		}
		pos = end + 1
	}
	return nil
}

func fieldText(obj map[string]json.RawMessage, name string) (string, error) {
	raw, ok := obj[name]
	if !ok {
		return "", fmt.Errorf("the url needs the input member %q, which is missing; send it", name)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case float64, bool:
		return strings.TrimSpace(string(raw)), nil
	default:
		return "", fmt.Errorf("the url template {%s} needs a string, number or boolean, got %s", name, strings.TrimSpace(string(raw)))
	}
}
