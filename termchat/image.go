package termchat

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxImageBytes bounds an image the client saves or draws.
const maxImageBytes = 16 << 20

// image is an image of a result: base64 data and its media type.
type image struct{ data, mediaType string }

// imageText is an image's place in a result's text; the image itself is
// queued to be shown under the result's line (imageLines).
func (t *transcript) imageText(im image) string {
	t.images = append(t.images, im)
	return "[image " + orUnknown(im.mediaType) + "]"
}

// imageLines shows an image under its result: a link to a saved copy
// (0600), and the image itself when the terminal has an image protocol.
func (d Display) imageLines(im image) []string {
	raw, err := base64.StdEncoding.DecodeString(im.data)
	if err != nil || len(raw) == 0 || len(raw) > maxImageBytes {
		return []string{"↳ image not shown: its data is not valid base64 of at most 16 MiB"}
	}
	line := fmt.Sprintf("↳ %s, %s", orUnknown(im.mediaType), sizeText(len(raw)))
	if p, err := d.saveImage(raw, im.mediaType); err == nil {
		line += ": file://" + p
	}
	out := []string{line}
	if s := d.drawImage(raw); s != "" {
		out = append(out, s)
	}
	return out
}

func sizeText(n int) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

// saveImage writes an image (0600) under ImageDir, named by its hash.
func (d Display) saveImage(raw []byte, mediaType string) (string, error) {
	dir := d.ImageDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "rap-chat-images")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	ext := ".img"
	if _, sub, ok := strings.Cut(mediaType, "/"); ok && sub != "" && len(sub) <= 10 && strings.Trim(sub, "abcdefghijklmnopqrstuvwxyz+.-") == "" {
		ext = "." + sub
	}
	p := filepath.Join(dir, hex.EncodeToString(sum[:12])+ext)
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// drawImage returns the escape sequence that draws raw in the terminal.
func (d Display) drawImage(raw []byte) string {
	b64 := base64.StdEncoding.EncodeToString(raw)
	switch d.ImageProtocol {
	case "iterm":
		return fmt.Sprintf("\x1b]1337;File=inline=1;size=%d;preserveAspectRatio=1:%s\a", len(raw), b64)
	case "kitty":
		var b strings.Builder
		for i := 0; i < len(b64); i += 4096 {
			end := min(i+4096, len(b64))
			more := 0
			if end < len(b64) {
				more = 1
			}
			if i == 0 {
				fmt.Fprintf(&b, "\x1b_Ga=T,f=100,m=%d;%s\x1b\\", more, b64[i:end])
			} else {
				fmt.Fprintf(&b, "\x1b_Gm=%d;%s\x1b\\", more, b64[i:end])
			}
		}
		return b.String()
	}
	return ""
}
