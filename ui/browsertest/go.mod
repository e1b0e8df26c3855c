module github.com/docketdb/docket/ui/browsertest

go 1.25

replace github.com/docketdb/docket => ../..

require (
	github.com/chromedp/cdproto v0.160.3
	github.com/chromedp/chromedp v0.23.1
	github.com/docketdb/docket v0.0.0-00010101000000-000000000000
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
