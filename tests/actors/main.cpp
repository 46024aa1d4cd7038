#define BOOST_TEST_MODULE boxrt_actors
#include <boost/test/unit_test.hpp>
