#define BOOST_TEST_MODULE boxrt_messages
#include <boost/test/unit_test.hpp>
