package main

import (
	"context"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
)

// dialServer connects to the servers at urls (comma separated: the client
// follows the leader among them) presenting token. The client is an
// engine.API, so every command runs on it as it runs on a directory's DB.
func dialServer(ctx context.Context, urls, token string) (engine.API, error) {
	c, err := client.Dial(ctx, urls, client.Options{Token: token})
	if err != nil {
		return nil, err
	}
	return c, nil
}
