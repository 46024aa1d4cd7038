#define BOOST_TEST_MODULE boxrt_backends
#include <boost/test/unit_test.hpp>
