// Tests of common/table.hpp: aligned text and CSV quoting.
#include <catch2/catch.hpp>

#include <sstream>

#include "common/errors.hpp"
#include "common/table.hpp"

using namespace dtsim;

TEST_CASE("common::Table: CSV quotes cells with commas", "[common]") {
  Table t({"name", "value"});
  t.add_row({"a,b", "1"});
  std::ostringstream out;
  t.print(out, TextFormat::CSV);
  CHECK(out.str() == "name,value\n\"a,b\",1\n");
}

TEST_CASE("common::Table: format names are checked", "[common]") {
  CHECK(parse_text_format("json") == TextFormat::JSON);
  CHECK_THROWS_AS(parse_text_format("xml"), InputError);
}
