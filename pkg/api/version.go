package api

import (
	"context"
	"net/http"
)

// VersionInfo answers GET /api/v1/version: the server's build.
type VersionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
	Go      string `json:"go"`
}

// Version returns the server's build.
func (c *Client) Version(ctx context.Context) (*VersionInfo, error) {
	var out VersionInfo
	err := c.do(ctx, http.MethodGet, "/api/v1/version", "", nil, &out)
	return &out, err
}
