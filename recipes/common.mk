# Shared by the recipes (demo, deb-en-de, deb-en-es): tools and small helpers.
# A recipe Makefile sets RECIPE_DIR before including this file:
#     RECIPE_DIR := $(realpath $(dir $(lastword $(MAKEFILE_LIST))))
#     include $(RECIPE_DIR)/../common.mk
# Recipes run in their own directory (make -C recipes/NAME), so the configs can name their files
# relative to it (work/data-bin, work/transformer) and be run by hand from there too.

.DEFAULT_GOAL := all

ifneq ($(realpath $(CURDIR)),$(RECIPE_DIR))
$(error run this recipe from its directory: make -C $(RECIPE_DIR))
endif

# The helper scripts (tables, sacrebleu, glossaries) run with the interpreter that runs mtkit: a MTKIT given
# as "/path/to/python -m mtkit" (or "/venv/bin/mtkit") brings its Python, so a venv that is not first on
# the PATH is used throughout, never the PATH's python3 (which may lack mtkit's dependencies).
MTKIT_HEAD := $(firstword $(MTKIT))
PYTHON ?= $(or $(if $(filter python%,$(notdir $(MTKIT_HEAD))),$(MTKIT_HEAD)),$(if $(findstring /,$(MTKIT_HEAD)),$(firstword $(wildcard $(dir $(MTKIT_HEAD))python3 $(dir $(MTKIT_HEAD))python))),python3)
MTKIT ?= $(PYTHON) -m mtkit
DEVICE ?= auto
WORK := work
STAMPS := $(WORK)/.stamps

# A failed command removes its half-written target, so make never takes it for finished.
.DELETE_ON_ERROR:
.SUFFIXES:

# $(call value_stamp,FILE,TEXT): FILE holds TEXT and changes (and so is newer than its dependents) only when
# TEXT changes. Makes a variable given on the command line (DATA=..., TIME=...) a real dependency.
define value_stamp
@mkdir -p $(dir $(1))
@if [ ! -f $(1) ] || [ "$$(cat $(1))" != "$(2)" ]; then echo "$(2)" > $(1); fi
endef

# $(call short_lines,IN,OUT,N): the first N lines of IN with 6 to 14 words: readable attention heatmaps.
define short_lines
@mkdir -p $(dir $(2))
awk 'NF >= 6 && NF <= 14' $(1) | head -n $(3) > $(2).tmp && mv $(2).tmp $(2)
endef

.PHONY: FORCE
FORCE:
