# The HTML report rendered in headless Chromium (tests/html/check_html.sh).
# `make test` builds the stamp, so the check runs whenever peakscope or the
# check changed; `make html-check` runs it unconditionally.
HTML_CHECK_STAMP := $(BUILD)/html/check.stamp
HTML_CHECK_DEPS  := $(CLI) tests/html/check_html.sh tests/html/check_dom.py tests/golden/fixture.pstrace

define run_html_check
	@mkdir -p $(BUILD)/html
	@tests/html/check_html.sh $(CLI) >$(BUILD)/html/check.log 2>&1; status=$$?; \
	  echo "html check: $$(grep -c '^ok ' $(BUILD)/html/check.log) ok, $$(grep -c '^not ok ' $(BUILD)/html/check.log) not ok (log: $(BUILD)/html/check.log)"; \
	  grep '^not ok ' $(BUILD)/html/check.log; exit $$status
endef

# Chromium comes from deps-viewers: installed before the check runs, also
# under `make -j` (where `test`'s prerequisites run side by side).
$(HTML_CHECK_STAMP): $(HTML_CHECK_DEPS) | deps-viewers
	$(run_html_check)
	@touch $@

.PHONY: html-check
html-check: $(HTML_CHECK_DEPS)
	$(run_html_check)

TEST_EXTRA += $(HTML_CHECK_STAMP)
