package manent

import (
	"crypto/rand"
	"time"
)

// NewDeploymentID returns a new deploy id: "dpl_" and 26 Crockford base32 characters,
// sortable by time.
func NewDeploymentID() string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	// 128 bits -> 26 base32 digits (the first holds 3 bits).
	var out [26]byte
	var acc uint64
	var bits uint
	j := 25
	for i := 15; i >= 0; i-- {
		acc |= uint64(b[i]) << bits
		bits += 8
		for bits >= 5 && j >= 0 {
			out[j] = alphabet[acc&31]
			acc >>= 5
			bits -= 5
			j--
		}
	}
	if j >= 0 {
		out[j] = alphabet[acc&31]
	}
	return "dpl_" + string(out[:])
}
