#define BOOST_TEST_MODULE boxrt_net
#include <boost/test/unit_test.hpp>
