package cachedmeta

import (
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
)

// uid is an object's UID. The API server makes every UID a UUID in its
// 36-character text form, a 48-byte allocation of its own in each
// decoded object; uid keeps such a UID as its 16 bytes, and any other
// (hand-made objects, tests) as its text.
type uid struct {
	bytes uuid.UUID
	// text is the UID when it is not a UUID in the form uuid.UUID.String
	// gives (bytes is then zero).
	text types.UID
}

// uidOf returns u as a uid.
func uidOf(u types.UID) uid {
	// uuid.Parse also takes upper case, braces and URNs: only the form it
	// writes back is kept as bytes, so that UID gives back u exactly.
	id, err := uuid.Parse(string(u))
	if err != nil || id == uuid.Nil || id.String() != string(u) {
		return uid{text: u}
	}
	return uid{bytes: id}
}

// UID returns the UID's text: a new string when it is kept as bytes.
func (u uid) UID() types.UID {
	if u.bytes == uuid.Nil {
		return u.text
	}
	return types.UID(u.bytes.String())
}
