module github.com/okeanos-storage/okeanos/bindings/go

go 1.21
