#define BOOST_TEST_MODULE boxrt_wire
#include <boost/test/unit_test.hpp>
