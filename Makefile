# pcoll - see README.md.
#   make              build into build/ (programs in build/bin/)
#   make test         build and run every test (ctest), sanitizer runs included
#   make demo         the main job: eager-SGD vs synchronous SGD on Fashion-MNIST
#                     under load imbalance, 4 ranks (scripts/demo.sh)
#   make cluster-demo the demo on an emulated cluster: 4 network namespaces of 2
#                     ranks each, 1 Gbit/s links (scripts/cluster-demo.sh; root)
#   make install PREFIX=/some/where
# Each target first installs missing Debian packages (scripts/install-deps.sh).

BUILD   ?= build
PREFIX  ?= /usr/local
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
CTEST_FLAGS ?=

# Open MPI needs these to run as root and with more ranks than cores
MPIRUN  ?= mpirun --oversubscribe --bind-to none $(if $(filter 0,$(shell id -u)),--allow-run-as-root)

.PHONY: all build deps test demo cluster-demo install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 \
	  || { cat $(BUILD).configure.log; exit 1; }
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure $(CTEST_FLAGS)

demo: build
	BUILD=$(BUILD) MPIRUN="$(MPIRUN)" scripts/demo.sh

cluster-demo: build
	BUILD=$(BUILD) scripts/cluster-demo.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
