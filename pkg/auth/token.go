package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// BootstrapSubject is the identity of Config.BootstrapToken.
const BootstrapSubject = "token:" + bootstrapName

const bootstrapName = "admin"

// HashToken returns the hex SHA-256 of token: the form `auth.tokens[].sha256`
// stores.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken returns a fresh random token ("mnt_" and 128 random bits), for
// `manent-server admin new-token`.
func NewToken() string {
	return "mnt_" + rand.Text()
}

// NewStaticToken makes a fresh token for auth.tokens: the token, to give
// to its user once, and its entry (name, the token's SHA-256, groups),
// checked as the server checks the configuration.
func NewStaticToken(name string, groups []string) (token string, tc TokenConfig, err error) {
	token = NewToken()
	tc = TokenConfig{Name: name, SHA256: HashToken(token), Groups: groups}
	// Checked as if a bootstrap token were set, so that the name "admin",
	// reserved then, is refused in every case.
	if _, errs := parseTokens([]TokenConfig{tc}, "bootstrap"); len(errs) > 0 {
		return "", TokenConfig{}, errors.New(errs[0].Message)
	}
	return token, tc, nil
}

// staticToken is a configured token, by hash.
type staticToken struct {
	name   string
	hash   [sha256.Size]byte
	groups []string
}

var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// parseTokens validates the configured tokens and decodes their hashes.
func parseTokens(cfg []TokenConfig, bootstrap string) ([]staticToken, []manent.FieldError) {
	var (
		tokens []staticToken
		errs   []manent.FieldError
		names  = map[string]int{}
		hashes = map[[sha256.Size]byte]int{}
	)
	for i, tc := range cfg {
		at := fmt.Sprintf("auth.tokens[%d]", i)
		switch prev, dup := names[tc.Name]; {
		case !tokenNameRE.MatchString(tc.Name):
			errs = append(errs, manent.FieldError{Path: at + ".name", Message: fmt.Sprintf("token name %q must match %s", tc.Name, tokenNameRE)})
		case dup:
			errs = append(errs, manent.FieldError{Path: at + ".name", Message: fmt.Sprintf("token name %q is already used by auth.tokens[%d]", tc.Name, prev)})
		case tc.Name == bootstrapName && bootstrap != "":
			errs = append(errs, manent.FieldError{Path: at + ".name", Message: `token name "admin" is reserved for the bootstrap token`})
		}
		names[tc.Name] = i
		raw, err := hex.DecodeString(strings.TrimSpace(tc.SHA256))
		if err != nil || len(raw) != sha256.Size {
			errs = append(errs, manent.FieldError{Path: at + ".sha256", Message: "must be the 64 hex digits of the token's SHA-256 (manent stores hashes, never tokens)"})
			continue
		}
		var h [sha256.Size]byte
		copy(h[:], raw)
		if prev, dup := hashes[h]; dup {
			errs = append(errs, manent.FieldError{Path: at + ".sha256", Message: fmt.Sprintf("same hash as auth.tokens[%d]: two names for one token", prev)})
			continue
		}
		hashes[h] = i
		for j, g := range tc.Groups {
			if strings.TrimSpace(g) == "" || strings.ContainsAny(g, " \t") {
				errs = append(errs, manent.FieldError{Path: fmt.Sprintf("%s.groups[%d]", at, j), Message: fmt.Sprintf("group %q must be a non-empty word", g)})
			}
		}
		tokens = append(tokens, staticToken{name: tc.Name, hash: h, groups: tc.Groups})
	}
	if bootstrap != "" {
		h := sha256.Sum256([]byte(bootstrap))
		if prev, dup := hashes[h]; dup {
			errs = append(errs, manent.FieldError{Path: fmt.Sprintf("auth.tokens[%d].sha256", prev), Message: "same hash as the bootstrap token"})
		}
		tokens = append(tokens, staticToken{name: bootstrapName, hash: h, groups: []string{"admins"}})
	}
	return tokens, errs
}

// lookupToken finds the static token whose hash is the SHA-256 of token.
// It compares the hash with every configured one in constant time and does
// not stop at a match, so the time taken does not tell which entry (if any)
// matched.
func lookupToken(tokens []staticToken, token string) (staticToken, bool) {
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range tokens {
		if subtle.ConstantTimeCompare(sum[:], tokens[i].hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return staticToken{}, false
	}
	return tokens[match], true
}
