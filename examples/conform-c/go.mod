module github.com/attnlab/attnlab/examples/conform-c

go 1.26.0

require github.com/attnlab/attnlab v0.0.0

require golang.org/x/sys v0.50.0 // indirect

replace github.com/attnlab/attnlab => ../..
