//go:build !docketclient

package main

import (
	"context"
	"errors"

	"github.com/docketdb/docket/engine"
)

// dialServer stands where remote.go's goes until package client has Dial:
// remote.go is built with -tags docketclient, and this file is deleted
// with the tag once the client lands.
func dialServer(ctx context.Context, urls, token string) (engine.API, error) {
	return nil, errors.New("docket: -server: this build has no network client yet (remote.go needs -tags docketclient)")
}
