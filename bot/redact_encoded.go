package bot

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"

	"github.com/loopbot/loopbot/internal/lazyre"
)

// minEncodedLen is the shortest encoded form that is looked for: a shorter one turns up in
// ordinary text by chance.
const minEncodedLen = 8

// encodedForms returns how a configured secret may appear once a tool or a person has
// encoded it: base64 (standard and URL alphabets, at each of the three alignments it can
// have inside a longer encoding, as in "Authorization: Basic" of "user:secret"), URL
// encoding (query and path, upper- and lower-case escapes) and hex.
func encodedForms(secret string) []string {
	var out []string
	add := func(f string) {
		if len(f) >= minEncodedLen && f != secret {
			out = append(out, f)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for k := range 3 {
			add(base64Inner(enc, secret, k))
		}
	}
	for _, f := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		add(f)
		add(lowerEscapes(f))
	}
	add(hex.EncodeToString([]byte(secret)))
	add(strings.ToUpper(hex.EncodeToString([]byte(secret))))
	return out
}

// base64Inner returns the base64 characters that depend on the secret's bytes alone when
// it follows k other bytes: the ones any encoding of a text holding the secret at that
// alignment contains, whatever comes before or after.
func base64Inner(enc *base64.Encoding, secret string, k int) string {
	buf := make([]byte, k+len(secret))
	copy(buf[k:], secret)
	full := enc.EncodeToString(buf)
	// Character j covers bits [6j, 6j+6); the secret's bits are [8k, 8(k+n)).
	from := (8*k + 5) / 6
	to := 8 * (k + len(secret)) / 6
	if to <= from {
		return ""
	}
	return full[from:to]
}

var escapeHex = lazyre.New(`%[0-9A-F]{2}`)

// lowerEscapes writes a URL encoding's escapes in lower case, as some encoders do.
func lowerEscapes(s string) string {
	return escapeHex.ReplaceAllStringFunc(s, strings.ToLower)
}
