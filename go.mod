module github.com/docketdb/docket

go 1.24.0

require (
	connectrpc.com/connect v1.19.2
	github.com/cockroachdb/datadriven v1.0.3
	github.com/robfig/cron/v3 v3.0.1
	github.com/tidwall/btree v1.8.2
	github.com/tidwall/wal v1.2.1
	github.com/vmihailenco/msgpack/v5 v5.4.1
	golang.org/x/sys v0.41.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
