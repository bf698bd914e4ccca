module github.com/bfcsim/bfcsim

go 1.26.8

require (
	git.sr.ht/~sbinet/gg v0.7.0
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.22.1
	github.com/cockroachdb/datadriven v1.0.3
	github.com/dustin/go-humanize v1.1.0
	github.com/ebitengine/purego v0.11.3
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875
	github.com/google/btree v1.1.3
	github.com/google/renameio/v2 v2.0.2
	github.com/klauspost/compress v1.20.3
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	github.com/stretchr/testify v1.12.1
	github.com/valyala/fastjson v1.6.10
	golang.org/x/image v0.30.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
	gonum.org/v1/plot v0.17.0
	google.golang.org/protobuf v1.36.12
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.28.0 // indirect
)
