package node

import (
	"testing"
)

// A key added to the configuration after a release changes no digest
// while it is unset: workers of that release and of this one, configured
// alike, agree in `admin workers` during a rolling upgrade.
// (secrets.files_under made every upgraded worker "differ" from the
// previous release's.)
func TestDigestLeavesOutUnsetNewParts(t *testing.T) {
	cfg := &Config{}
	wc, err := policyDigest(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wc.Parts["secrets.files_under"]; ok {
		t.Errorf("parts %v: secrets.files_under unset is in the digest, so a worker of the previous release differs", wc.Parts)
	}
	cfg.Secrets.FilesUnder = []string{"/etc/manent/secrets"}
	set, err := policyDigest(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Parts["secrets.files_under"]; !ok || set.Digest == wc.Digest {
		t.Errorf("secrets.files_under set: parts %v, digest %s (unset %s): the part must count", set.Parts, set.Digest, wc.Digest)
	}
}
