package cachedmeta

import (
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// uid is an object's UID. The API server makes every UID a UUID in its
// 36-character text form, a 48-byte allocation of its own in each
// decoded object; uid keeps such a UID as its 16 bytes, and any other
// (hand-made objects, tests) as its text.
type uid struct {
	bytes [16]byte
	// text is the UID when it is not a UUID in lower-case text form
	// (bytes is then zero).
	text types.UID
}

// uidOf returns u as a uid.
func uidOf(u types.UID) uid {
	var out uid
	if !parseUUID(string(u), &out.bytes) || out.bytes == ([16]byte{}) {
		return uid{text: u}
	}
	return out
}

// UID returns the UID's text: a new string when it is kept as bytes.
func (u uid) UID() types.UID {
	if u.bytes == ([16]byte{}) {
		return u.text
	}
	var buf [36]byte
	hex.Encode(buf[0:8], u.bytes[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u.bytes[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u.bytes[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u.bytes[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], u.bytes[10:16])
	return types.UID(buf[:])
}

// parseUUID reads s, a UUID in lower-case text form
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), into out; false when s is not
// exactly that (so that UID gives back s byte for byte).
func parseUUID(s string, out *[16]byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		out[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
